//! Table tests of `decide`: every run state and policy.
