"""The loader's control port: `/status`, `/plan`, `/replay`, `/row` and `/ledger` on its
health port, behind a control token."""
