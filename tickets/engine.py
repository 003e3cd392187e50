"""The only writer of ticket-domain state (ARCHITECTURE.md "The engine")."""
