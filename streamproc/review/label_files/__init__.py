"""Reviewers' labels in and out of files: the documented label JSONL, Label Studio's JSON
export, and the labelled answers in the benchmark JSONL shape (``streamproc review
import`` / ``review export``; docs/labels.md)."""
