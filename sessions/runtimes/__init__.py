"""Runtime adapters (pure Python, no Django): Codex app-server, ACP, Pi RPC, Claude."""
