def checks():
    raise RuntimeError("cannot reach the provider")
