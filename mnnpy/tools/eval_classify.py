from mnnpy.tools.eval_ocr import add_arguments, run  # noqa
