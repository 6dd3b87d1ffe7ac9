"""Applications built on mnnpy, apart from the engine, using only its public API.

- ``mnnpy.apps.ocr``: PP-OCR text reading (detection, direction classification,
  recognition, CTC decoding) with NumPy, SciPy and Pillow around any model runner.
- ``mnnpy.apps.demo``: the main job on real input, ``mnnpy demo`` (also
  ``python -m mnnpy.demo``): render a line, read it back, time each stage.
- ``mnnpy.apps.vad``: voice-activity detection with silero-vad, ``mnnpy vad FILE.wav``:
  streaming speech probabilities and speech segments (silero's rules) at 8 or 16 kHz,
  other rates resampled.
- ``mnnpy.apps.ocr_folder``: ``mnnpy ocr DIR --out FILE``, every image of a folder read by
  PP-OCR here or on Ray (``mnnpy.apps.folder_job`` runs ``mnnpy.apps.ocr_rows.OcrRows``, the
  pipeline as a batch job's row class, and writes one result per image, sorted by path).
- ``mnnpy.apps.reference``: onnxruntime, the apps' reference backend (``backend="onnxruntime"``).

What an app may use: ``mnnpy`` (``Interpreter``, ``load``, ``Session``, ``SessionSpec``, the error
classes, ``MAX_THREADS``), ``mnnpy.converter.convert`` and ``mnnpy.models``. The core
never imports an app; the CLI names ``mnnpy.apps.demo``, ``mnnpy.apps.ocr_folder`` and
``mnnpy.apps.vad`` as lazily imported subcommands.
"""
