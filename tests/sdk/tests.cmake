# tests/sdk: the stage SDK's parameter declarations and validation.
set(sonopipe_test_links_sdk sonopipe_stages)
