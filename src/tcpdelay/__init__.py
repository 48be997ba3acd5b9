"""tcpdelay: what delay and late loss real-time media sees over TCP (or UDP), and what to change.

Subpackages, one concern each; data flows one way
(scenario -> run -> per-packet records -> metrics -> report):

- ``tcpdelay.model``      analytical models (math only, no I/O)
- ``tcpdelay.traffic``    media and cross-traffic sources
- ``tcpdelay.transport``  real sockets carrying media
- ``tcpdelay.testbed``    network namespaces + the Rust link emulator
- ``tcpdelay.metrics``    per-packet records -> figures of merit
- ``tcpdelay.experiments`` scenarios and sweeps
- ``tcpdelay.report``     plots and HTML
- ``tcpdelay.cli``        the ``tcpdelay`` command

Everything is measured on the testbed or computed by the models; there is no simulation
backend yet (a scenario file says nothing about *how* it is run, so one can be added).
"""

__version__ = "0.1.0"
