"""CPU Executions, one module per op family; each registers with ``cpu_execution``."""
