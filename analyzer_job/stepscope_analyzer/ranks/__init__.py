"""The rank work, storage in: finding each rank's artifacts, reading them within bounds, and summarising one rank
(where its trace was recorded, or centrally when no usable summary is there)."""
