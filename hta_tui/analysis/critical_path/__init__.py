"""Critical path of a step (HTA 0.6's `critical_path_analysis`), on polars and numpy.

graph    the edge table of one rank's window (HTA's edge semantics, deviations listed there)
rules    HTA's call lists, thresholds, edge and bound types
host     the CUDA runtime lock and each CPU thread's call-stack walk
device   GPU op spans, launch delays, kernel gaps, syncs; launch-queue lengths
longest  topological order and longest path over numpy edge arrays
path     one rank's path, its bound-by breakdown, its edges, "what if"
tables   every rank and step as the report's tables, and the path across ranks
export   the trace with a path overlaid, for Perfetto (HTA's overlay)
"""
