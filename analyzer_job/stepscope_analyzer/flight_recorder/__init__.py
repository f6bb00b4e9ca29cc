"""PyTorch Flight Recorder dumps: bounded decoding, and the cross-rank analysis of hangs and desyncs."""

from stepscope_analyzer.flight_recorder.calls import STALL_SECONDS, rank_list
from stepscope_analyzer.flight_recorder.dump import Dump, FlightRecorderError, parse_dump
from stepscope_analyzer.flight_recorder.load import load_dumps
from stepscope_analyzer.flight_recorder.wavefront import analyse

__all__ = ["STALL_SECONDS", "Dump", "FlightRecorderError", "analyse", "load_dumps", "parse_dump", "rank_list"]
