"""`python -m sunk.runtime.operator`: run the NodeSet operator (see app.py for settings)."""

from .app import main

raise SystemExit(main())
