"""The staff chat page, split by job: ``layout`` (components), ``handlers`` (wiring to the
services), ``view`` (turning stored turns into what the components show)."""
