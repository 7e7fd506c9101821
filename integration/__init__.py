"""The integration lane: the program's objects admitted by the real API server, Kueue and JobSet
on loopback with kwok nodes (controlplane, nodes, controllers, runs; `python -m integration.lane`),
the real Pulumi engine's scenarios on that lane (engine), and the stack file reader compared with
the Pulumi CLI's (stackfile_check). tests/integration runs them as pytest (`make integration`)."""
