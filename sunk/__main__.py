from sunk.cli import main

raise SystemExit(main())
