"""The model behind the ML ``credit_exam``: a random forest trained here on synthetic applicants.

No public data set has the paper's three loan attributes, so training data are generated:
monthly income 1,500-8,000, debt 0-3,000 and loan amount 1,000-30,000 (uniform), labelled
Accept / Marginal / Reject by thresholding a noisy latent risk that grows with the debt ratio
(Debt / Income) and the loan ratio (LoanAmount / Income), the two ratios of the rule version in
``reasoning_udfs.loan_rules``. The forest sees only the raw attributes and learns the ratios.

Training takes well under a second and is deterministic (fixed seeds, one thread), so it runs
once per Python process on first use and nothing is written to disk. A random forest, because
SHAP's TreeExplainer computes exact Shapley values of its class probabilities in about a
millisecond per row (it refuses a 3-class GradientBoostingClassifier).

``python -m models.credit_model`` prints the training and held-out accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported when the model is trained: a question on stored reasons needs none of them
    from lime.lime_tabular import LimeTabularExplainer
    from shap import TreeExplainer
    from sklearn.ensemble import RandomForestClassifier

FEATURES = ("Income", "Debt", "LoanAmount")
CLASSES = ("Accept", "Marginal", "Reject")
SEED = 7
N_TRAIN, N_HELD_OUT = 4000, 1000
INCOME, DEBT, LOAN = (1500.0, 8000.0), (0.0, 3000.0), (1000.0, 30000.0)
DEBT_SCALE, LOAN_SCALE, NOISE = 0.4, 4.0, 0.25  # risk = debt/income/0.4 + loan/income/4 + N(0, .25)
RISK_THRESHOLDS = (1.2, 2.4)  # below: Accept, above: Reject, between: Marginal
LIME_SAMPLES = 500


def synthetic_applicants(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` applicants (columns ``FEATURES``) and their class indices into ``CLASSES``."""
    rng = np.random.default_rng(seed)
    income, debt, loan = (rng.uniform(lo, hi, n) for lo, hi in (INCOME, DEBT, LOAN))
    risk = debt / income / DEBT_SCALE + loan / income / LOAN_SCALE + rng.normal(0.0, NOISE, n)
    return np.column_stack([income, debt, loan]), np.digitize(risk, RISK_THRESHOLDS)


@dataclass(frozen=True)
class CreditModel:
    forest: RandomForestClassifier
    shap: TreeExplainer
    lime: LimeTabularExplainer
    train_accuracy: float
    held_out_accuracy: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Class indices for rows of ``FEATURES``."""
        return self.forest.predict(x)

    def shap_attributions(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Class indices, per row the exact Shapley values of the predicted class's
        probability for each feature, and the base value they add to (the class's expected
        probability): one TreeExplainer call for the whole batch."""
        pred = self.predict(x)
        values = self.shap.shap_values(x)  # (rows, features, classes)
        base = np.asarray(self.shap.expected_value)[pred]
        return pred, values[np.arange(len(x)), :, pred], base

    def lime_attributions(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Class indices, per row LIME's local linear weights for the predicted class, and
        the local model's intercept they add to.

        LIME samples: its random state is reseeded before each row, so a row's reason does not
        depend on which rows shared its batch (reruns must reproduce reasons)."""
        pred = self.predict(x)
        weights = np.zeros(x.shape)
        intercepts = np.zeros(len(x))
        for i, (row, label) in enumerate(zip(x, pred)):
            self.lime.random_state.seed(SEED)  # shared with LIME's discretizer and sampler
            explanation = self.lime.explain_instance(
                row,
                self.forest.predict_proba,
                labels=(int(label),),
                num_features=len(FEATURES),
                num_samples=LIME_SAMPLES,
            )
            for feature, weight in explanation.as_map()[int(label)]:
                weights[i, feature] = weight
            intercepts[i] = explanation.intercept[int(label)]
        return pred, weights, intercepts


@cache
def trained() -> CreditModel:
    """The model, trained on first use in this process."""
    from lime.lime_tabular import LimeTabularExplainer
    from shap import TreeExplainer
    from sklearn.ensemble import RandomForestClassifier

    x, y = synthetic_applicants(N_TRAIN + N_HELD_OUT, SEED)
    forest = RandomForestClassifier(
        n_estimators=100, max_depth=8, min_samples_leaf=5, random_state=SEED, n_jobs=1
    ).fit(x[:N_TRAIN], y[:N_TRAIN])
    lime = LimeTabularExplainer(
        x[:N_TRAIN],
        mode="classification",
        feature_names=list(FEATURES),
        class_names=list(CLASSES),
        random_state=SEED,
    )
    return CreditModel(
        forest=forest,
        shap=TreeExplainer(forest),
        lime=lime,
        train_accuracy=forest.score(x[:N_TRAIN], y[:N_TRAIN]),
        held_out_accuracy=forest.score(x[N_TRAIN:], y[N_TRAIN:]),
    )


if __name__ == "__main__":
    model = trained()
    print(f"training accuracy ({N_TRAIN} applicants): {model.train_accuracy:.3f}")
    print(f"held-out accuracy ({N_HELD_OUT} applicants): {model.held_out_accuracy:.3f}")
