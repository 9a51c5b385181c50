"""The conformance suite's pytest entry, model repository and docs.

The cases themselves live in kserve_v2/conformance (shipped in the wheel).
"""
