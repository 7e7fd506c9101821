"""Pure planners: GPU network carving, node pool rules, Kueue flavors and quotas, run placement
checks and the NeMo configuration. Plain data in, plain data out; they import facts only, so
they are tested directly, without Pulumi."""
