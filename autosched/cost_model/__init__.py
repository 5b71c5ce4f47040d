"""Cost models over features of the lowered loop IR (XGBoost ranking; random)."""

from autosched.cost_model.features import FEATURE_NAMES, N_FEATURES, extract, extract_batch
from autosched.cost_model.model import CostModel, FeatureCache, RandomCostModel, XGBCostModel, normalised_throughput

__all__ = ["FEATURE_NAMES", "N_FEATURES", "extract", "extract_batch", "CostModel", "FeatureCache",
           "RandomCostModel", "XGBCostModel", "normalised_throughput"]
