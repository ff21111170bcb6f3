"""Pure Kubernetes manifest builders (plain dicts) used by the components and the operator."""
