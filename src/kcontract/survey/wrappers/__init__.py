"""Library calls that need more than argument order to fit kcontract's calling conventions
(a weight and bias around a normalisation, a layout change around attention, a target
dtype for a cast).  One module per framework; each function names the one library call it
surveys."""
