"""persistence: buffers run events per root run and writes each run once, at its end; built by `bootstrap.bootstrap`."""
