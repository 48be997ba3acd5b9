"""Simulation: a run's plan in ns-3 instead of on the testbed (docs/ns3.md).

* :mod:`tcpdelay.sim.job` — the *simulation job*: what a simulation is given (hosts, the link,
  media and bulk flows, times, seed, output directory), plain JSON, validated; and what ns-3
  cannot do, named at plan time (:func:`tcpdelay.sim.job.unsupported`);
* :mod:`tcpdelay.sim.aqm` — a link direction's queue discipline (CoDel, FQ-CoDel, PIE) as ns-3's
  queue disc and its attributes, and what of it does not map;
* :mod:`tcpdelay.sim.ns3_runtime` — builds and runs one job in ns-3 (imported only inside a
  worker: ns-3's Python bindings take seconds to import and abort the process on a fatal error);
* :mod:`tcpdelay.sim.worker` — a worker process that imports ns-3 once and forks a child per
  simulation, and the client that hands it jobs;
* :mod:`tcpdelay.sim.worker_socket` — one such worker for many processes, over a Unix socket,
  started when its first client connects;
* :mod:`tcpdelay.sim.worker_child` — what both share: the forked child that runs one
  simulation, the worker's environment and error;
* ``cpp/tcpdelay_sim.h`` — the parts that run per packet, in C++ (the emulated link, the media
  sender and receiver, bulk transfers, the TCP state probe).

The layer sits beside :mod:`tcpdelay.testbed`: it knows records and traffic sources, never
scenarios or plans (:mod:`tcpdelay.experiments.backends.ns3` translates a plan into a job).
"""
