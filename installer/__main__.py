import sys

from installer.main import main

sys.exit(main())
