from hta_tui.cli import main

raise SystemExit(main())
