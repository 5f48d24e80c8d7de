"""The `hub` command line and the local stack it runs (`hub up`)."""
