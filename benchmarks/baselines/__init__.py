"""Baselines the speed and peer benchmarks compare against: a hand-written decode step
(:mod:`.hand`) and where a peer tool's interpreter lives (:mod:`.peers`)."""
