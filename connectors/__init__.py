"""Source connectors: they read databases and files and publish through the one publish path."""
