"""``python -m celestial_client.cli``: the same program as the ``celestial`` command."""

from celestial_client.cli.program import main

raise SystemExit(main())
