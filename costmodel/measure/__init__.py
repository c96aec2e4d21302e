"""Measurement: probe this machine, time kernels against their bounds, fit
efficiencies, attach profiler traces. numpy only; plots live in :mod:`costmodel.plots`."""

from .calibrate import Calibration, calibrate
from .microbench import Bench, batch_sweep, benchmarks, flag_batch_anomalies, run_benchmarks
from .probe import Measurement, ProbeResult, environment, probe, time_best
from .probe_report import ProbeReport, ProbeRequest, run_probe
from .profile import attach_profile, load_trace_events

__all__ = [
    "Measurement",
    "ProbeResult",
    "probe",
    "ProbeRequest",
    "ProbeReport",
    "run_probe",
    "time_best",
    "environment",
    "Bench",
    "benchmarks",
    "run_benchmarks",
    "batch_sweep",
    "flag_batch_anomalies",
    "Calibration",
    "calibrate",
    "load_trace_events",
    "attach_profile",
]
