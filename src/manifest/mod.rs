//! Files → typed objects with identity: the desired state, read and validated.
