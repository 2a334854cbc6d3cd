from sectorflow.cli import main

raise SystemExit(main())
