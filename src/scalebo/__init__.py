"""scalebo: robust LLM scaling-law fitting and budgeted choice of which runs to train.

Conventions used throughout the package:

* ``N`` — model size in parameters; ``D`` — training tokens; ``C`` — training compute in
  FLOPs (``6·N·D`` unless a table provides it); ``loss`` — cross-entropy in nats.
* All arrays are float64. Laws are fitted on log residuals ``log L_pred − log L_obs``
  (natural log).
"""

__version__ = "0.1.0"
