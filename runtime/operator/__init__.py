"""The NodeSet operator: NodeSet custom resources -> slurmd pods, kept safe to change."""
