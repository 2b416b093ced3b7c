"""The data's way in: loaders sharded across processes, and files read with their faults named."""
