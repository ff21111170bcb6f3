"""The Pulumi program: one tenant's Slurm cluster per stack (stacks/Pulumi.<tenant>-<env>.yaml).

The same two lines as the program `sunk init` writes: the body is sunk's (sunk.components.program)."""

from sunk.api import stack_program

stack_program()
