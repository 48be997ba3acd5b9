"""The reproductions of the five papers the project is built from: what each paper's sweeps
measured, set beside the paper's numbers and the models, and the tables of its page.

One module per paper (:mod:`delay_friendliness`: Brosh et al.; :mod:`tcp_latency`: Cardwell,
Savage and Anderson; :mod:`hspa_audio`: the HSPA audio study; :mod:`video_tcp_variants`:
Watanabe et al.; :mod:`mpeg4_transport`: Papadimitriou and Tsaoussidis), what they share in
:mod:`sweep_data`. They sit at the experiments/report level: they read results/, metrics/,
experiments/ and model/, and nothing lower imports them.
"""
