# A percent past what the runtime holds would turn the collector off.
gc {
  percent = 2147483648
}
