from amux_common.doctor import Check


def checks():
    yield Check("runtime:stand-in", ok=True, detail="1.0.0, starts")
    yield Check("provider:stand-in", ok=False, detail="optional, unreachable", required=False)
