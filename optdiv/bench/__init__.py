"""The harness behind ``optdiv bench`` and ``optdiv report``; research scripts live in a checkout's benchmarks/."""
