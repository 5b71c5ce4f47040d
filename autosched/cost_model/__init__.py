"""Cost models over features of the lowered loop IR (XGBoost ranking; random), and the one shipped with autosched
(:func:`load_pretrained`, read from package data on first use)."""

from autosched.cost_model.features import (
    FEATURE_NAMES,
    FEATURES_VERSION,
    N_FEATURES,
    extract,
    extract_batch,
    feature_fingerprint,
)
from autosched.cost_model.model import CostModel, FeatureCache, RandomCostModel, XGBCostModel, normalised_throughput
from autosched.cost_model.shipped import load_pretrained, pretrained_info

__all__ = ["FEATURE_NAMES", "FEATURES_VERSION", "N_FEATURES", "extract", "extract_batch", "feature_fingerprint",
           "CostModel", "FeatureCache", "RandomCostModel", "XGBCostModel", "normalised_throughput",
           "load_pretrained", "pretrained_info"]
