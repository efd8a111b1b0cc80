"""The tasks people run: the paper's loan example, TPC-H and the CDA queries over it (with
photos and reviews), LFW, and the UDFs they call."""
