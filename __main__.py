from kbroker.broker.cli import main

raise SystemExit(main())
