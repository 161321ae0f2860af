"""``python -m appliance.cli``: the same as the ``appliance`` command."""

import sys

from appliance.cli.main import main

sys.exit(main())
