# An endless loop at the top level of the file: it never finishes loading.
# expect: LOAD | did not load: time limit: still running after

while True:
    pass
