"""What users and the tests run beside the program: the offline render (mocks, runner, schema
validation), the README's config table, the CRD cache, the benchmarks and the identity lock."""
