"""A stopping rule, a metric and a method of the test suite's own, one module each (issue
31 item 2): each is one definition plus one registration, and ``test_plugins_cli`` runs
them through the command line."""
