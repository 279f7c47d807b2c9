"""``python -m scalebo.cli`` runs the ``scalebo`` command."""

from scalebo.cli.main import main

raise SystemExit(main())
