"""Survey a backend: the framework's own implementation of every op of the suite, at every
dtype its table surveys, checked against every applicable contract; the conformance matrix
(ops x dtypes x classes), its renderings, and two backends side by side.

    from kcontract.survey import survey, Processes, Ray
    m = survey("jax", "cpu", ops=["sum", "gelu"], executor=Processes(2))
    m.to_json()
"""
from .cells import Cell, CellResult, ClassVerdict, run_cell
from .fanout import Processes, Ray, Serial
from .matrix import SURVEY_SCHEMA, Difference, SurveyMatrix, compare
from .run import plan, survey
from .table import Implementation, Table, load_table

__all__ = ["survey", "plan", "compare", "SurveyMatrix", "Difference", "Cell", "CellResult",
           "ClassVerdict", "run_cell", "Serial", "Processes", "Ray", "load_table", "Table",
           "Implementation", "SURVEY_SCHEMA"]
