"""The mnnpy model format: flatbuffers schema and the Python code flatc generates from it."""
