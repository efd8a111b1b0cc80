"""ProvRC: compressed cell-level lineage queried in situ (DSLog, paper in ../shared/papers).

A lineage relation (output cells → input cells, integer arrays) is compressed losslessly into
a range-encoded table with relative value transformation; backward and forward queries along
a path of operations run over the compressed tables without expanding them.
"""

from materialization.provrc.encode import compress
from materialization.provrc.parquet import read, write
from materialization.provrc.query import Boxes, backward, forward
from materialization.provrc.relation import Relation
from materialization.provrc.table import Table

__all__ = ["Boxes", "Relation", "Table", "backward", "compress", "forward", "read", "write"]
